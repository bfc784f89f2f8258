"""Supervision as data: child specs and kinds (`spec`), the restart decision (`policy`),
the child table every supervisor shares (`core`), and the tree's supervisors (`tree`)."""
