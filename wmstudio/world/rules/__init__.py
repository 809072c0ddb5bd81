"""Domain rules: a rule's CEL check (compiled, evaluated within a CPU budget), the equations, patterns and field
references read from checks, and the error codes rules name."""
