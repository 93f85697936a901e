"""Password reset says what happened (issue 21, finding 6): without a mail server, or when the
mail fails, the page says so instead of claiming a mail was sent."""
import pytest
from django.contrib.auth.models import User
from django.core import mail

pytestmark = pytest.mark.django_db


@pytest.fixture
def member():
    return User.objects.create_user("member", email="member@example.org", password="pw-12345678")


def test_without_a_mail_server_the_page_says_so(client, settings, member):
    settings.EVALAPP_PASSWORD_RESET_BY_MAIL = False
    for response in (client.get("/accounts/password_reset/"),
                     client.post("/accounts/password_reset/", {"email": "member@example.org"})):
        assert response.status_code == 503
        assert "Password reset by e-mail is not set up here" in response.content.decode()
    assert mail.outbox == []


def test_a_mail_that_cannot_be_sent_is_an_error_not_a_sent_page(client, settings, member):
    settings.EVALAPP_PASSWORD_RESET_BY_MAIL = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_USE_TLS = "127.0.0.1", 9, False  # nothing listens
    response = client.post("/accounts/password_reset/", {"email": "member@example.org"})
    assert response.status_code == 503 and "The reset mail could not be sent" in response.content.decode()


def test_with_a_mail_server_the_reset_mail_goes_out(client, settings, member):
    settings.EVALAPP_PASSWORD_RESET_BY_MAIL = True
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    response = client.post("/accounts/password_reset/", {"email": "member@example.org"})
    assert response.status_code == 302 and response["Location"] == "/accounts/password_reset/done/"
    assert len(mail.outbox) == 1 and "/accounts/reset/" in mail.outbox[0].body
