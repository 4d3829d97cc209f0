#!/usr/bin/env node
// `vgpuctl` as npm links it in a clone (npx vgpuctl): runs the built CLI. This file is committed
// so that `npm ci` links it before the first build — npm skips a bin whose target is missing.
import "../dist/vgpuctl/main.js";
