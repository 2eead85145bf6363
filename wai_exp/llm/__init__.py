"""The one HTTP model layer: providers and model specs, the retrying httpx POST, the
OpenAI-compatible and Anthropic chat clients and the turn they return.

Agents, judges and ``reference_logprobs`` call models through this folder. It knows
nothing about rows, stages or worlds: messages in, a ``Completion`` out. Its modules import
httpx, so they load only when a model is actually called.
"""
