"""The learned built-in extractor's clause model: what a user clause is (kinds), how turns are cut into clauses,
the classifier head over the bundled sentence embedder, and how it is trained (corpus, training script)."""
