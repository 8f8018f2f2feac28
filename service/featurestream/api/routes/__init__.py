"""Route modules, included from one place (``api/app.py``)."""
