"""The parts a resource actor is made of, as plain objects: no thespian, no process.

A resource actor (`tether.actors`) is a thin shell that composes these and does the IO:
each part is fed what happened (a call arrived, a timer fired, output came) and keeps
the bookkeeping, so it is tested with plain calls (tests/resources/), not with a tree.
"""
