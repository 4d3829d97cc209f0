#!/usr/bin/env node
// `vgpud` as npm links it in a clone (npx vgpud): runs the built daemon. This file is committed
// so that `npm ci` links it before the first build — npm skips a bin whose target is missing.
import "../dist/bin/vgpud.js";
