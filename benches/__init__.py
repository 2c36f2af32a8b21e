"""The suite's bench modules, one per workload; installed as `gpubench.benches` (a package, so that
`pytest --pyargs gpubench.benches` finds them in a wheel)."""
