"""The SGLang build the server will run, read without importing it: its install, its flag table and
argument parsing replayed, the interpreter that finds it, and whether our plugin loads in it."""
