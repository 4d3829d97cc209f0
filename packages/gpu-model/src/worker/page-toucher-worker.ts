// The page toucher's entry (built JS: dist/worker/page-toucher-worker.js): touches the pages
// it was given once (page-toucher.ts), reports how many, and ends.
import { parentPort, workerData } from "node:worker_threads";
import { type TouchWork, touchPages } from "./page-toucher.js";

parentPort!.postMessage(touchPages(workerData as TouchWork));
