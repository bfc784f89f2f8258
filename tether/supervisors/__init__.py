"""Supervision: the restart decision (`policy`), the child table every supervisor shares
(`core`), and the tree's supervisors (`tree`). The child specs and kinds they run are
plain data in `tether.kinds`, which actors import too."""
