"""The browser viewer of trials (``hil view``; ``--view`` on hil trial / demo / run): trial/view/app.py."""
