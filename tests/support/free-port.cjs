// Prints a loopback port that was free a moment ago, drawn below the kernel's range for outgoing
// connections (ip_local_port_range), where another client's connection cannot take it before the
// server binds. Usage: node free-port.cjs [PORT_TO_AVOID]
const net = require("net");
const fs = require("fs");
const low = Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0]) || 32768;
const top = low - 1 >= 11000 ? low - 1 : 0;
const avoid = Number(process.argv[2] || 0);
const tryPort = (left) => {
  const port = top ? 10000 + Math.floor(Math.random() * (top - 10000 + 1)) : 0;
  if (port && port === avoid) return tryPort(left);
  const server = net.createServer();
  server.once("error", () => (left > 0 ? tryPort(left - 1) : process.exit(1)));
  server.listen(port, "127.0.0.1", () => {
    console.log(server.address().port);
    server.close();
  });
};
tryPort(64);
