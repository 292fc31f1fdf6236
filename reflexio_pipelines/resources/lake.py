"""The lake as a Dagster resource: its root is configuration, never a global."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.lake.io import Lake


class LakeResource(dg.ConfigurableResource):
    """Root of the lake (a directory or `s3://bucket/prefix`; see docs/configuration.md), and whether asset metadata
    may quote its rows."""

    root: str
    #: False = materialisation metadata shows counts, never rows of user data (ids, texts), so nothing an erasure
    #: has to reach is copied into Dagster's run storage.
    metadata_previews: bool = True

    def get(self) -> Lake:
        """The Lake rooted at the configured path."""
        return Lake.at(self.root)
