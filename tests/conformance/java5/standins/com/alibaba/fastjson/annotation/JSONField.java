// Stand-in (ours, not fastjson's code) for fastjson's @JSONField. Only the attributes
// RocketMQ 4.9.8's (and 5.3.3's) client/common/remoting use (serialize) matter; name/deserialize honoured too.
package com.alibaba.fastjson.annotation;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.FIELD, ElementType.METHOD, ElementType.PARAMETER})
public @interface JSONField {
    String name() default "";

    boolean serialize() default true;

    boolean deserialize() default true;

    int ordinal() default 0;

    // 5.3.3 (BatchAck): accepted, not honoured by the stand-in
    String[] alternateNames() default {};

    Class<?> serializeUsing() default Void.class;

    Class<?> deserializeUsing() default Void.class;
}
