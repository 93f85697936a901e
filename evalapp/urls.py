from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path

from annotation import views
from annotation.throttles import throttle_page

urlpatterns = [
    # Our pages link static/favicon.svg (base.html); pages that are not ours (the admin) make the
    # browser ask for /favicon.ico: send it there too rather than answer 404.
    path("favicon.ico", lambda request: HttpResponseRedirect(static("favicon.svg"))),
    path("admin/login/", throttle_page("login", methods=("POST",))(admin.site.login)),
    path("admin/", admin.site.urls),
    # Password guesses are POSTs: throttled per client IP (docs/api.md).
    path("accounts/login/", throttle_page("login", methods=("POST",))(auth_views.LoginView.as_view()),
         name="login"),
    # Each reset request may send a mail: throttled like a login.
    path("accounts/password_reset/", throttle_page("login", methods=("POST",))(views.password_reset),
         name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("annotation.api_urls")),
    path("", include("annotation.urls")),
]
# A 500 under /api/ answers JSON in the API's error shape (docs/api.md).
handler500 = "annotation.api_errors.server_error"
