"""Accounts: teams, their members and roles, invitations and API tokens (the Django app, its
models and the rules they keep). Their pages and API are in ``accounts.web``."""
