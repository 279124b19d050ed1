"""What a command does, without click: the in-process chain, compare, the baseline gate,
protocols and presets, check-plugin, output paths and claiming a build directory."""
