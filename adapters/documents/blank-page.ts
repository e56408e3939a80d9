/**
 * Whether a rendered page is blank: every pixel's grey value within BLANK_GREY_RANGE levels of
 * every other's (white paper, a solid colour). OCR of such a page reads nothing and cost about
 * 0.8 CPU-s; this costs one pass over the pixels the render already made (a few ms at 150 dpi).
 * A page with any mark darker or lighter than that (a word, a line, a speck of a scan) is not
 * blank and is read as before.
 */

/** Largest spread of grey values (0..255) a blank page has; text of lower contrast is unreadable anyway. */
export const BLANK_GREY_RANGE = 16;

/** `rgba`: 4 bytes per pixel, as a canvas's getImageData gives them. */
export function isBlankRender(rgba: ArrayLike<number>): boolean {
  let min = 255;
  let max = 0;
  for (let at = 0; at + 2 < rgba.length; at += 4) {
    // Integer luma (ITU-R BT.601): no float work per pixel.
    const grey = ((rgba[at] ?? 0) * 77 + (rgba[at + 1] ?? 0) * 150 + (rgba[at + 2] ?? 0) * 29) >> 8;
    if (grey < min) min = grey;
    if (grey > max) max = grey;
    if (max - min > BLANK_GREY_RANGE) return false;
  }
  return true;
}
