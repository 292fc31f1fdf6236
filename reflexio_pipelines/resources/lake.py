"""The lake as a Dagster resource: its root is configuration, never a global."""

from __future__ import annotations

import dagster as dg

from reflexio_pipelines.lake.io import Lake


class LakeResource(dg.ConfigurableResource):
    """Root of the lake (a local directory; see docs/configuration.md)."""

    root: str

    def get(self) -> Lake:
        """The Lake rooted at the configured path."""
        return Lake.at(self.root)
