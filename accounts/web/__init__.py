"""The pages and API of accounts: teams, members, invitations, the API token (page and
``/api/token/``), an experiment's sharing settings, and the login rate limit's answer. What they
change (teams, memberships, invitations, tokens) is ``accounts``' own domain."""
