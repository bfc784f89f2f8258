"""The host side of the actor tree: how the embedding process reaches it and keeps it honest.

Transport (the thespian patches, the per-runtime secret, one private context per calling
thread), the call engine and what it knows of routes, the watch on the tree's own processes,
and the port file a later host reaps a dead one's processes by. Nothing here runs inside an
actor except what the tree inherits at fork (the patches and the secret).
"""
