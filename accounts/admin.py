from django.contrib import admin

from accounts.models import Invitation, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "created"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["team", "email", "role", "invited_by", "created", "expires", "accepted_at", "accepted_by"]
    list_filter = ["role"]
    readonly_fields = ["token"]
