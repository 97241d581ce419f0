# Copyright 2025 The disco_rl authors. Licensed under Apache-2.0.
