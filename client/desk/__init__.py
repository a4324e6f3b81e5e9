"""The research desk: a web page over the same Temporal client code as the
CLI (`deepresearch ui`). ``app.py`` is the server, ``static/`` the page."""
