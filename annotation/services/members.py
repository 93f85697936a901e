"""Who belongs to a study: researchers (dashboard, settings, members) and annotators.

A study keeps at least one researcher once it has one: neither removing nor demoting the
last one is allowed (ValueError saying so), so a study never loses everyone who may run it.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from ..models import Study, StudyMembership


def _refuse_losing_last_researcher(study: Study, membership: StudyMembership) -> None:
    if membership.role == StudyMembership.Role.RESEARCHER and not StudyMembership.objects.filter(
            study=study, role=StudyMembership.Role.RESEARCHER).exclude(pk=membership.pk).exists():
        raise ValueError("a study keeps at least one researcher: add another before removing or "
                         "demoting the last")


def study_membership_set(*, study: Study, user, role: str) -> StudyMembership:
    """Give ``user`` the ``role`` in ``study`` (replacing any earlier role).

    ValidationError for an unknown role; ValueError when it would demote the last researcher.
    """
    with transaction.atomic():
        membership = StudyMembership.objects.select_for_update().filter(study=study, user=user).first()
        if membership is None:
            membership = StudyMembership(study=study, user=user, role=role)
        elif membership.role != role:
            _refuse_losing_last_researcher(study, membership)
            membership.role = role
        membership.full_clean()
        membership.save()
        return membership


def study_membership_remove(*, study: Study, user) -> None:
    """Take ``user`` out of ``study``; ValueError when they are not a member or its last researcher."""
    with transaction.atomic():
        membership = StudyMembership.objects.select_for_update().filter(study=study, user=user).first()
        if membership is None:
            raise ValueError(f"{user.username!r} is not a member of this study")
        _refuse_losing_last_researcher(study, membership)
        membership.delete()


def study_member_add(*, study: Study, identifier: str, role: str) -> StudyMembership:
    """Add an existing user, named by username or e-mail (case-insensitive), to ``study``.

    ValueError when no user or several users match, or the user is a member already (their
    role is changed with ``study_membership_set``); ValidationError for an unknown role.
    """
    identifier = identifier.strip()
    User = get_user_model()
    user = User.objects.filter(username=identifier).first()
    if user is None and "@" in identifier:
        matches = list(User.objects.filter(email__iexact=identifier)[:2])
        if len(matches) > 1:
            raise ValueError(f"several users have the e-mail {identifier!r}; add them by username")
        user = matches[0] if matches else None
    if user is None:
        raise ValueError(f"no user with the username or e-mail {identifier!r}; invite them as a new user")
    with transaction.atomic():
        existing = StudyMembership.objects.filter(study=study, user=user).first()
        if existing is not None:
            raise ValueError(f"{user.username!r} is a member already ({existing.role}); change their role "
                             "in the list")
        membership = StudyMembership(study=study, user=user, role=role)
        membership.full_clean()
        membership.save()
        return membership


def study_member_invite(*, study: Study, username: str, email: str, role: str):
    """Create a user who has no password yet and make them a member of ``study``; returns the user.

    They choose their password with a one-time link (Django's password-reset token: it stops
    working once a password is set, or after PASSWORD_RESET_TIMEOUT). ValidationError for a
    taken or invalid username, an invalid e-mail or role; ValueError when the e-mail belongs
    to an existing user (add that user instead).
    """
    User = get_user_model()
    email = email.strip()
    holder = User.objects.filter(email__iexact=email).first() if email else None
    if holder is not None:
        raise ValueError(f"the e-mail {email!r} belongs to {holder.username!r}: add that user instead")
    with transaction.atomic():
        user = User(username=username.strip(), email=email)
        user.set_unusable_password()
        user.full_clean()
        user.save()
        membership = StudyMembership(study=study, user=user, role=role)
        membership.full_clean()
        membership.save()
        return user


__all__ = ["study_member_add", "study_member_invite", "study_membership_remove", "study_membership_set"]
