"""Generation backends: transformers, vLLM and an OpenAI-compatible endpoint, behind one interface."""
