// Property tests run on a fixed seed by default, so CI is reproducible; FC_SEED=random (or a
// number) explores other inputs. A failure prints its seed and counterexample either way.
import fc from "fast-check";

const raw = process.env.FC_SEED ?? "20261122";
const seed = raw === "random" ? (Date.now() ^ (process.pid << 16)) | 0 : Number(raw);
fc.configureGlobal({ seed });
