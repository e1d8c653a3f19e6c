"""The rules the checks apply: source rules, mutants and seeded faults, scenario keys, coverage."""
