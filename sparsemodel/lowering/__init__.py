"""What a solver sees: the lowered problem, its restricted solves, step-size constants, guards,
incremental supports and swap models, the l1 path, and the cvxpy reference and relaxations."""
