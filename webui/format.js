// Numbers as people read them on the pages: grouped digits, binary byte units, short durations.

const grouped = new Intl.NumberFormat('en-US');

export function count(n) {
  return typeof n === 'number' && Number.isFinite(n) ? grouped.format(n) : '—';
}

// "1 node", "3 nodes": a count with its noun.
export function counted(n, noun) {
  return `${count(n)} ${noun}${n === 1 ? '' : 's'}`;
}

export function bytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${units[unit]}`;
}

export function percent(fraction, digits = 0) {
  return typeof fraction === 'number' && Number.isFinite(fraction) ? `${(fraction * 100).toFixed(digits)}%` : '—';
}

export function seconds(s) {
  if (typeof s !== 'number' || !Number.isFinite(s)) return '—';
  if (s === 0) return '0 s';
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  const whole = Math.round(s);
  if (whole < 3600) return pair(Math.floor(whole / 60), 'min', whole % 60, 's');
  if (whole < 86400) return pair(Math.floor(whole / 3600), 'h', Math.floor((whole % 3600) / 60), 'min');
  return pair(Math.floor(whole / 86400), 'd', Math.floor((whole % 86400) / 3600), 'h');
}

function pair(big, bigUnit, small, smallUnit) {
  return small ? `${big} ${bigUnit} ${small} ${smallUnit}` : `${big} ${bigUnit}`;
}

// Whole seconds under a minute: the cache page redraws every few seconds, and "3.5 s ago"
// flickering to "5.5 s ago" says nothing more than "4 s ago".
export function ago(s) {
  if (typeof s !== 'number' || !Number.isFinite(s)) return 'unknown';
  if (s < 60) return `${Math.max(0, Math.round(s))} s ago`;
  return `${seconds(s).split(' ').slice(0, 2).join(' ')} ago`;
}

export function clock(date) {
  return date.toLocaleTimeString('en-GB', { hour12: false });
}

// For chart axes, where a label has room for about five characters.
export function compact(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return '—';
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${+(n / 1e9).toFixed(1)}G`;
  if (abs >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (abs >= 1e4) return `${+(n / 1e3).toFixed(0)}k`;
  if (abs >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return String(+n.toFixed(2));
}
