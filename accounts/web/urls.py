from django.urls import path

from accounts.web import views

urlpatterns = [
    path("accounts/token/", views.api_token, name="api_token"),
    path("teams/", views.team_list, name="team_list"),
    path("teams/<int:pk>/", views.team_detail, name="team_detail"),
    path("teams/<int:pk>/invite/", views.invite, name="team_invite"),
    path(
        "teams/<int:pk>/invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke,
        name="team_invitation_revoke",
    ),
    path("teams/<int:pk>/members/<int:membership_id>/role/", views.member_role, name="team_member_role"),
    path("teams/<int:pk>/members/<int:membership_id>/remove/", views.member_remove, name="team_member_remove"),
    path("invite/<str:token>/", views.accept_invitation, name="accept_invitation"),
    path("experiments/<int:pk>/sharing/", views.experiment_sharing, name="experiment_sharing"),
]
