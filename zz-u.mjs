import uws from 'uWebSockets.js';
const app = uws.App();
app.post('/x', (res, req) => { res.onAborted(() => {}); res.onData((c, last) => { if (last) res.end('ok'); }); });
app.get('/g', (res) => res.end('g'));
app.listen('127.0.0.1', 9333, (s) => console.log('listening', !!s));
setTimeout(() => process.exit(0), 4000);
