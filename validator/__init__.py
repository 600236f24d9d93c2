"""spark-validate: proves that an SGLang server for Ling-3.0-flash on DGX Spark really runs its three
decode optimizations (Humming MoE, FP8 LM head, NEXTN speculation) instead of inferring it later from
throughput."""

__version__ = "0.1.0"
TOOL_NAME = "spark-validate"
