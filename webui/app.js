// Entry point: prefixd serves this same page at / and /cache; the path picks what it shows.

import { initKeyControls } from './api.js';
import { mountCache } from './cache.js';
import { mountChat } from './chat.js';

const pages = { chat: mountChat, cache: mountCache };
const page = location.pathname.replace(/\/+$/, '') === '/cache' ? 'cache' : 'chat';

for (const link of document.querySelectorAll('.nav a')) {
  if (link.dataset.page === page) link.setAttribute('aria-current', 'page');
}
document.title = page === 'cache' ? 'prefixd · cache' : 'prefixd · chat';
document.body.dataset.page = page;
initKeyControls();
pages[page](document.getElementById('page'));
