"""Reflexio on a lake: the Dagster code location and the pure learning logic.

Importing this package is cheap; Dagster, LiteLLM and the embedding model are imported lazily by the modules
that need them.
"""

import os

# LiteLLM fetches a model cost map from the internet at import unless told not to; onnxruntime looks up a
# telemetry host in long runs. Both must stay offline by default, so set the switches before either is imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
