//! `error-drop`: frees what other nodes dropped. The reasons were counted where they arose.

use graph::{CONSUMED, Ctx, Node, NodeInfo, NodeKind, Point};

#[derive(Debug, Default)]
pub struct ErrorDrop;

impl Node for ErrorDrop {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: "error-drop",
            kind: NodeKind::Internal,
            nexts: &[],
            errors: &[],
        }
    }

    fn process(&mut self, ctx: &mut Ctx<'_>, bufs: &[u32], next: &mut [u16]) {
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
