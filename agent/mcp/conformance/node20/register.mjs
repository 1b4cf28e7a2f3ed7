// Loaded with node --import: installs hooks.mjs. The conformance suite's
// 0.1 releases import fs.globSync (Node 22) at the top of their one bundle,
// though only the tier-check command calls it; on Node 20 the import alone
// stops every command. The hook gives that bundle an fs with a globSync
// that says so, so the client scenarios run on Node 20.
import { register } from 'node:module';
register('./hooks.mjs', import.meta.url);
