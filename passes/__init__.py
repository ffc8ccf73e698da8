"""fuseopt's passes: one rewrite pass per file, the file named after the pass flag."""
