"""Math answer verification: extraction, normalisation, equivalence, isolation."""
