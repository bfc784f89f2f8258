"""Places: where a conversation's processes run (host, a bubblewrap sandbox, or a prefix
that enters an environment the host already has), and their limits.

A pure library (no actors, no thespian, nothing of the host): `Place` is the data,
`wrap` turns a command into the one to exec in a place, in the cgroup that holds its
limits (`tether.cgroups`).
"""

from tether.places.place import Limits, Place, PlaceError
from tether.places.wrap import Wrapped, check, wrap

__all__ = ["Limits", "Place", "PlaceError", "Wrapped", "check", "wrap"]
