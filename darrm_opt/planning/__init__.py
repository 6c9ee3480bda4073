"""Planning a labelling job: the table and its parameters that answer Q queries most accurately within a
total (ε, δ) budget, as the ledger accounts them (above the privacy accounting it relies on)."""
