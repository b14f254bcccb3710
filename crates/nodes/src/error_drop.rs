//! `error-drop`: frees what other nodes dropped. The reasons were counted where they arose.

use graph::{CONSUMED, Ctx, Node, Point};

#[derive(Debug, Default)]
pub struct ErrorDrop;

graph::node! { ErrorDrop: "error-drop", Internal; }

impl Node for ErrorDrop {
    fn process(&mut self, ctx: &mut Ctx<'_, Self>, bufs: &[u32], next: &mut [u16]) {
        if ctx.capturing(Point::Drop) {
            for &b in bufs {
                let rx_if = ctx.pool.meta(b).rx_if;
                ctx.capture(Point::Drop, rx_if, b);
            }
        }
        ctx.pool.free_bulk(bufs);
        next.fill(CONSUMED);
    }
}
