// Scenario: HTTP publish of 100 SenML records per request. After the window, in the same run and process
// as the bench, the peer: a raw COPY of the same rows (same columns and values, 10,000 rows per COPY
// statement) into the same messages table, CPU of this process plus every PostgreSQL process per row.
// Reported: records/s, the service's CPU per record (service + PostgreSQL) and its ratio to COPY's
// (target: at most 2x). Stored rows are counted against every acknowledged record.
import postgres from 'postgres';
import { diffCpuSnapshots, takeCpuSnapshot } from '../lib/cpu.js';
import { checkStored, ingestScenario } from './ingest-http-1.js';

const RECORDS = 100;
const BT = 1_800_000_000;
const PACK = JSON.stringify(Array.from({ length: RECORDS }, (_, i) => (i === 0
  ? { bn: 'urn:dev:bench:', bt: BT, bu: 'Cel', n: `t${i}`, v: 20 + i / 10, t: i }
  : { n: `t${i}`, v: 20 + i / 10, t: i })));
const COPY_ROWS_PER_STATEMENT = 10_000;
const COPY_MAX_ROWS = 500_000;

/** What the writer stores for one record of PACK, as COPY text. */
function copyText(/** @type {any} */ data, /** @type {number} */ rows) {
  const head = `${data.workspaceId}\t${data.channelId}\t${data.deviceId}\thttp\t\\N\t`;
  let text = '';
  for (let r = 0; r < rows; r++) {
    const i = r % RECORDS;
    text += `${head}urn:dev:bench:t${i}\tCel\t${BT + i}\t${20 + i / 10}\n`;
  }
  return text;
}

/** COPY `total` rows in statements of COPY_ROWS_PER_STATEMENT; CPU of this process and PostgreSQL. */
async function copyPeer(/** @type {any} */ ctx, /** @type {number} */ total) {
  const sql = postgres(ctx.databaseUrl, { max: 1, onnotice: () => {} });
  try {
    // Settle the table first so autovacuum after the HTTP load is not billed to COPY.
    await sql`vacuum analyze messages`;
    const roots = { bench: process.pid };
    const before = takeCpuSnapshot(roots, { includePostgres: true });
    let copied = 0;
    while (copied < total) {
      const rows = Math.min(COPY_ROWS_PER_STATEMENT, total - copied);
      const stream = await sql`copy messages (workspace_id, channel_id, publisher_id, protocol, subtopic, name, unit, time, value) from stdin`.writable();
      await new Promise((resolve, reject) => {
        stream.on('error', reject);
        stream.end(copyText(ctx.data, rows), resolve);
      });
      copied += rows;
    }
    const cpu = diffCpuSnapshots(before, takeCpuSnapshot(roots, { includePostgres: true }));
    const seconds = Object.values(cpu.cpuSeconds).reduce((a, b) => a + b, 0);
    return { rows: copied, cpuSeconds: cpu.cpuSeconds, cpuPerRecordUs: (seconds / copied) * 1e6, otherCpuSeconds: cpu.otherCpuSeconds };
  } finally {
    await sql.end();
  }
}

const base = ingestScenario('ingest-http-100', PACK, RECORDS);

export default {
  ...base,
  description: 'HTTP publish, 100 SenML records per request; CPU per record vs a raw COPY of the same rows in the same run (target: <= 2x COPY)',
  async teardown(/** @type {any} */ ctx, /** @type {any} */ result) {
    const stored = await checkStored(ctx, result, RECORDS, 'ingest-http-100');
    const { generator = 0, ...server } = ctx.cpu?.cpuSeconds ?? {};
    void generator;
    const serverSeconds = Object.values(server).reduce((/** @type {number} */ a, /** @type {number} */ b) => a + b, 0);
    const records = result.requests * RECORDS;
    const cpuPerRecordUs = records > 0 ? (serverSeconds / records) * 1e6 : null;
    const copy = await copyPeer(ctx, Math.min(COPY_MAX_ROWS, Math.max(COPY_ROWS_PER_STATEMENT, stored.stored)));
    const ratio = cpuPerRecordUs === null ? null : cpuPerRecordUs / copy.cpuPerRecordUs;
    console.log(`bench: ingest-http-100: ${Math.round(records / result.wallSeconds)} records/s, ${cpuPerRecordUs?.toFixed(2)} µs CPU per record; `
      + `raw COPY ${copy.cpuPerRecordUs.toFixed(2)} µs per record (${copy.rows} rows); ratio ${ratio?.toFixed(2)} (target <= 2): ${ratio !== null && ratio <= 2 ? 'PASS' : 'MISS'}`);
    return {
      ...stored,
      recordsPerSec: records / result.wallSeconds,
      cpuPerRecordUs,
      copyPeer: copy,
      copyRatio: ratio,
      copyVerdict: ratio !== null && ratio <= 2 ? 'PASS' : 'MISS',
    };
  },
};
