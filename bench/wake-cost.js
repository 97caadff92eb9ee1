// What one sleep/wake round trip costs this machine: a Node TCP echo server in a child process and a
// client here send one byte back and forth, strictly one at a time, so every byte wakes a sleeping
// process. Prints the CPU each side spends per round trip (utime + stime from /proc). On bare metal this
// is a few µs; on a VM where wake-ups trap to the hypervisor it is several times that, and every
// closed-loop benchmark here (the bare handler included) pays it per wake-up: read its ratios with it.
//
//   node bench/wake-cost.js [round trips, default 20000]
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

/** CPU ms of a process so far (all threads). */
function cpuMs(/** @type {number} */ pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10; // clock ticks of 10 ms (CLK_TCK 100)
}

if (process.argv[2] === '--echo-server') {
  const server = net.createServer((socket) => socket.on('data', (data) => socket.write(data)));
  server.listen(0, '127.0.0.1', () => process.send?.(/** @type {net.AddressInfo} */ (server.address()).port));
} else {
  const trips = Number(process.argv[2] ?? 20_000);
  const child = fork(fileURLToPath(import.meta.url), ['--echo-server']);
  const port = await new Promise((resolve) => child.once('message', resolve));
  const socket = net.connect(/** @type {number} */ (port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.setNoDelay(true);
  const start = { server: cpuMs(/** @type {number} */ (child.pid)), client: cpuMs(process.pid), at: process.hrtime.bigint() };
  await new Promise((resolve) => {
    let done = 0;
    socket.on('data', () => (++done < trips ? socket.write('x') : resolve(undefined)));
    socket.write('x');
  });
  const wallMs = Number(process.hrtime.bigint() - start.at) / 1e6;
  const perTrip = (/** @type {number} */ ms) => ((ms * 1000) / trips).toFixed(1);
  console.log(`${trips} round trips in ${wallMs.toFixed(0)} ms: `
    + `echo server ${perTrip(cpuMs(/** @type {number} */ (child.pid)) - start.server)} µs CPU per round trip, `
    + `client ${perTrip(cpuMs(process.pid) - start.client)} µs`);
  socket.destroy();
  child.kill();
}
