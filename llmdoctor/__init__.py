"""llmdoctor: diagnose vLLM inference services on NVIDIA GPUs and Kubernetes."""

__version__ = "0.1.0"
