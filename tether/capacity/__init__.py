"""Capacity: the tree's memory budget, what each resource costs, what to stop to keep it.

usage.py (the usage record every health node carries), ceiling.py (a resource's memory
ceiling: a child cgroup of `tether.cgroups`, or an rlimit), measure.py (the tree's charge and its budget), policy.py (the governor's pure decision),
governor.py (admission and eviction on the host, over the two).
"""
