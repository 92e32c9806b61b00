"""Code verification: program extraction, sandboxed execution, trusted output comparison."""
