// node:fs as it is, plus the globSync Node 20 lacks: calling it (only the
// tier-check command does) fails saying why.
import fs from 'node:fs';
export * from 'node:fs';
export default fs;
export function globSync() { throw new Error('fs.globSync needs Node 22: only the tier-check command uses it'); }
