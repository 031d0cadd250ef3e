// Builds elements without innerHTML, so that text from the model or the cache is always text.
//   el('p', {class: 'note', hidden: true}, 'plain text', otherElement)
// Attributes: class, text (textContent), on<Event> handlers, booleans (set when true),
// dataset entries through data-*, everything else as an attribute.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElementNS(tag === 'svg' || attrs.svg ? SVG : HTML, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === 'svg' || value === undefined || value === null || value === false) continue;
    if (name === 'text') node.textContent = value;
    else if (name.startsWith('on') && typeof value === 'function') node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function svgEl(tag, attrs = {}, ...children) {
  return el(tag, { ...attrs, svg: true }, ...children);
}

const HTML = 'http://www.w3.org/1999/xhtml';
const SVG = 'http://www.w3.org/2000/svg';
