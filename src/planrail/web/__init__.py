"""``planrail ui``: a local dashboard over a store (needs the ``[web]`` extra: Starlette and
uvicorn). See ``docs/dashboard.md``.

- :mod:`planrail.web.views`: what is shown, as data (masked); :mod:`planrail.web.gantt` the
  timeline; :mod:`planrail.web.pages` the HTML; ``static/`` the one hand-written script.
- :mod:`planrail.web.security`: Host check, token cookie, CSRF and same-origin checks.
- :mod:`planrail.web.app`: routes, the server-sent event stream, the operator actions.
- :mod:`planrail.web.server`: the uvicorn server.
"""

from planrail.web.app import Dashboard, create_app
from planrail.web.security import Guard, new_token
from planrail.web.server import DashboardServer

__all__ = ["Dashboard", "DashboardServer", "Guard", "create_app", "new_token"]
