from .access import user_can_create_studies


def permissions(request) -> dict:
    return {"can_create_studies": user_can_create_studies(request.user)}
